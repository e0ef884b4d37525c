use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<u32> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    for &y in &v[1..=v[0] as usize] {
        println!("{}", if y % 4 == 0 && y % 100 != 0 { "YES" } else { "NO" });
    }
}
