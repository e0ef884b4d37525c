use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (n, target) = (v[0] as usize, v[1]);
    let a = &v[2..2 + n];
    let mut count = 0;
    for i in 0..n {
        for j in i..n {
            if a[i] + a[j] == target {
                count += 1;
            }
        }
    }
    println!("{}", count);
}
