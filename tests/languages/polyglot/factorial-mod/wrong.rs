use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let n: u64 = s.trim().parse().unwrap();
    let mut result: u64 = 1;
    for i in 1..n {
        result = result * i % 1_000_000_007;
    }
    println!("{}", result);
}
