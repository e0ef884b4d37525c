use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let xs = &v[1..=v[0] as usize];
    let (mut best, mut run) = (1, 1);
    for i in 1..xs.len() {
        run = if xs[i] > xs[i - 1] { run + 1 } else { 1 };
        best = best.max(run);
    }
    println!("{}", best);
}
