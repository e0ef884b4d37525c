const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
let total = 0;
const out = [];
for (const x of data.slice(1, data[0] + 1)) {
  out.push(total);
  total += x;
}
console.log(out.join(" "));
