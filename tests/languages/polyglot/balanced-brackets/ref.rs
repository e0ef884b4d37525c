use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let mut stack = Vec::new();
    let mut ok = true;
    for c in s.trim().chars() {
        match c {
            '(' | '[' | '{' => stack.push(c),
            _ => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if stack.pop() != Some(want) {
                    ok = false;
                    break;
                }
            }
        }
    }
    println!("{}", if ok && stack.is_empty() { "YES" } else { "NO" });
}
