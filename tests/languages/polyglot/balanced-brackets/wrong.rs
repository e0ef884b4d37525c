use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut depth = [0i32; 3];
    let mut ok = true;
    for c in s.trim().chars() {
        if let Some(i) = "([{".find(c) {
            depth[i] += 1;
        } else if let Some(i) = ")]}".find(c) {
            depth[i] -= 1;
            if depth[i] < 0 {
                ok = false;
            }
        }
    }
    println!("{}", if ok && depth == [0, 0, 0] { "YES" } else { "NO" });
}
