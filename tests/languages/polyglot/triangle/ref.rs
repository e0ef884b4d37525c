use std::io::Read;

fn main() {
    let mut t = String::new();
    std::io::stdin().read_to_string(&mut t).unwrap();
    let mut s: Vec<i64> = t.split_whitespace().map(|x| x.parse().unwrap()).collect();
    s.sort();
    let kind = if s[0] + s[1] <= s[2] {
        "invalid"
    } else if s[0] == s[2] {
        "equilateral"
    } else if s[0] == s[1] || s[1] == s[2] {
        "isosceles"
    } else {
        "scalene"
    };
    println!("{}", kind);
}
