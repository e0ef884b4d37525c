use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let v: Vec<i32> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (r, c) = (v[0] as usize, v[1] as usize);
    let a: Vec<&[i32]> = (0..r).map(|i| &v[2 + i * c..2 + (i + 1) * c]).collect();
    for j in 0..c {
        let line: Vec<String> = (0..r).map(|i| a[i][j].to_string()).collect();
        println!("{}", line.join(" "));
    }
}
