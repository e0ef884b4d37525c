use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<usize> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (n, amount) = (v[0], v[1]);
    let coins = &v[2..2 + n];
    let mut best = vec![usize::MAX; amount + 1];
    best[0] = 0;
    for a in 1..=amount {
        for &c in coins {
            if c <= a && best[a - c] != usize::MAX {
                best[a] = best[a].min(best[a - c] + 1);
            }
        }
    }
    if best[amount] == usize::MAX {
        println!("-1");
    } else {
        println!("{}", best[amount]);
    }
}
