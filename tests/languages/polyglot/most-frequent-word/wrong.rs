use std::collections::HashMap;
use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut counts: HashMap<&str, u32> = HashMap::new();
    let mut order = Vec::new();
    for w in s.split_whitespace() {
        let c = counts.entry(w).or_insert(0);
        if *c == 0 {
            order.push(w);
        }
        *c += 1;
    }
    let mut best = order[0];
    for w in order {
        if counts[w] > counts[best] {
            best = w;
        }
    }
    println!("{}", best);
}
