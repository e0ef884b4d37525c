use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (a, mut b, m) = (v[0], v[1], v[2]);
    let mut result = 1 % m;
    let mut base = a % m;
    while b > 0 {
        if b & 1 == 1 {
            result = result * base % m;
        }
        base = base * base % m;
        b >>= 1;
    }
    println!("{}", result);
}
