const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const [r, c] = data;
const a = [];
for (let i = 0; i < r; i++) a.push(data.slice(2 + i * c, 2 + (i + 1) * c));
const out = [];
for (let j = 0; j < r; j++) {
  const line = [];
  for (let i = 0; i < c; i++) line.push(a[j][i]);
  out.push(line.join(" "));
}
console.log(out.join("\n"));
