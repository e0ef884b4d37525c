const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
function isPrime(n) {
  if (n < 1) return false;
  for (let d = 2; d * d <= n; d++) if (n % d === 0) return false;
  return true;
}
const out = data.slice(1, data[0] + 1).map((n) => (isPrime(n) ? "YES" : "NO"));
console.log(out.join("\n"));
