const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
let [n, amount] = data;
const coins = data.slice(2, 2 + n).sort((a, b) => b - a);
let count = 0;
for (const c of coins) {
  count += Math.floor(amount / c);
  amount %= c;
}
console.log(String(amount === 0 ? count : -1));
