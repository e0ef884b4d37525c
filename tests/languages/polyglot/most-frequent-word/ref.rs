use std::collections::BTreeMap;
use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
    for w in s.split_whitespace() {
        *counts.entry(w).or_insert(0) += 1;
    }
    let mut best = "";
    let mut top = 0;
    for (w, &c) in &counts {
        if c > top {
            top = c;
            best = w;
        }
    }
    println!("{}", best);
}
