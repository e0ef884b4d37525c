use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<usize> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (n, mut amount) = (v[0], v[1]);
    let mut coins = v[2..2 + n].to_vec();
    coins.sort_by(|a, b| b.cmp(a));
    let mut count = 0;
    for c in coins {
        count += amount / c;
        amount %= c;
    }
    if amount == 0 {
        println!("{}", count);
    } else {
        println!("-1");
    }
}
