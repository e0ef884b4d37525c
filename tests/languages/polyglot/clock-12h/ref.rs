use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let (hh, mm) = s.trim().split_once(':').unwrap();
    let h: u32 = hh.parse().unwrap();
    let shown = (h + 11) % 12 + 1;
    println!("{}:{} {}", shown, mm, if h < 12 { "AM" } else { "PM" });
}
