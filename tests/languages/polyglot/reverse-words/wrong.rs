use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let reversed: String = s.trim().chars().rev().collect();
    println!("{}", reversed);
}
