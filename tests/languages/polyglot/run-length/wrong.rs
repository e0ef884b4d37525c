use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let b = s.trim().as_bytes();
    let mut out = String::new();
    let mut run = 1;
    for i in 1..b.len() {
        if b[i] == b[i - 1] {
            run += 1;
        } else {
            out.push(b[i - 1] as char);
            out.push_str(&run.to_string());
            run = 1;
        }
    }
    println!("{}", out);
}
