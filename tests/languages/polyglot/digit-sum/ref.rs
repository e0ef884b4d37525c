use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let b = s.trim().as_bytes();
    let sum: u32 = b[..b.len()].iter().map(|c| (c - b'0') as u32).sum();
    println!("{}", sum);
}
