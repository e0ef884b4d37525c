use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut n: u32 = s.trim().parse().unwrap();
    let values = [1000, 500, 100, 50, 10, 5, 1];
    let symbols = ["M", "D", "C", "L", "X", "V", "I"];
    let mut out = String::new();
    for (v, sym) in values.iter().zip(symbols.iter()) {
        while n >= *v {
            out.push_str(sym);
            n -= v;
        }
    }
    println!("{}", out);
}
