use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut lines = s.lines();
    let k: u8 = lines.next().unwrap().trim().parse().unwrap();
    let line = lines.next().unwrap();
    let out: String = line
        .bytes()
        .map(|c| if c == b' ' { ' ' } else { ((c - b'a' + k) % 26 + b'a') as char })
        .collect();
    println!("{}", out);
}
