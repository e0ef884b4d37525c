const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(BigInt);
const gcd = (x, y) => (y === 0n ? x : gcd(y, x % y));
const g = gcd(a, b);
console.log(`${g} ${a * b}`);
