use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut n: u32 = s.trim().parse().unwrap();
    let values = [1000, 900, 500, 400, 100, 90, 50, 40, 10, 9, 5, 4, 1];
    let symbols = ["M", "CM", "D", "CD", "C", "XC", "L", "XL", "X", "IX", "V", "IV", "I"];
    let mut out = String::new();
    for (v, sym) in values.iter().zip(symbols.iter()) {
        while n >= *v {
            out.push_str(sym);
            n -= v;
        }
    }
    println!("{}", out);
}
