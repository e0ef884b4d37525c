use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let words: Vec<&str> = s.split_whitespace().collect();
    let key = |w: &str| {
        let mut v: Vec<char> = w.chars().collect();
        v.sort();
        v
    };
    println!("{}", if key(words[0]) == key(words[1]) { "YES" } else { "NO" });
}
