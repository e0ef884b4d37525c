use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let s = s.trim().to_lowercase();
    let r: String = s.chars().rev().collect();
    println!("{}", if s == r { "YES" } else { "NO" });
}
