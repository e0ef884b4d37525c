const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const [n, target] = data;
const a = data.slice(2, 2 + n);
let count = 0;
for (let i = 0; i < n; i++) {
  for (let j = i; j < n; j++) if (a[i] + a[j] === target) count++;
}
console.log(String(count));
