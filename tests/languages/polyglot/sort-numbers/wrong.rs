use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut it = s.split_whitespace();
    let n: usize = it.next().unwrap().parse().unwrap();
    let mut v: Vec<&str> = it.take(n).collect();
    v.sort();
    println!("{}", v.join(" "));
}
