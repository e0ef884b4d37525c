let [a, b, m] = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(BigInt);
let result = 1n % m;
let base = a % m;
for (; b > 0n; b >>= 1n) {
  if (b & 1n) result = (result * base) % m;
  base = (base * base) % m;
}
console.log(result.toString());
