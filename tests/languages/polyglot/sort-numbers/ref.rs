use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut it = s.split_whitespace();
    let n: usize = it.next().unwrap().parse().unwrap();
    let mut v: Vec<i64> = it.take(n).map(|x| x.parse().unwrap()).collect();
    v.sort();
    let out: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    println!("{}", out.join(" "));
}
