use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let n: u64 = s.trim().parse().unwrap();
    let mut d = String::new();
    let mut m = n;
    while m > 0 {
        d.insert(0, if m % 2 == 1 { '1' } else { '0' });
        m /= 2;
    }
    println!("{}", d);
}
