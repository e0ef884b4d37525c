use std::io::Read;

fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    let n: u32 = s.trim().parse().unwrap();
    for i in 1..=n {
        if i % 3 == 0 {
            println!("Fizz");
        } else if i % 5 == 0 {
            println!("Buzz");
        } else if i % 15 == 0 {
            println!("FizzBuzz");
        } else {
            println!("{}", i);
        }
    }
}
