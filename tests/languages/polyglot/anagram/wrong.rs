use std::collections::BTreeSet;
use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let words: Vec<&str> = s.split_whitespace().collect();
    let key = |w: &str| w.chars().collect::<BTreeSet<char>>();
    let ok = words[0].len() == words[1].len() && key(words[0]) == key(words[1]);
    println!("{}", if ok { "YES" } else { "NO" });
}
