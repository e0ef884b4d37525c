const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
let total = 0;
const out = [];
for (const x of data.slice(1, data[0] + 1)) {
  total += x;
  out.push(total);
}
console.log(out.join(" "));
