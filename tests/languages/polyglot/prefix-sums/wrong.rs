use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut it = s.split_whitespace().map(|x| x.parse::<i64>().unwrap());
    let n = it.next().unwrap() as usize;
    let mut total = 0i64;
    let mut out = Vec::new();
    for x in it.take(n) {
        out.push(total.to_string());
        total += x;
    }
    println!("{}", out.join(" "));
}
