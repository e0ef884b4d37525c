const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const v = data.slice(1, data[0] + 1);
let best = 1;
let run = 1;
for (let i = 1; i < v.length; i++) {
  run = v[i] >= v[i - 1] ? run + 1 : 1;
  best = Math.max(best, run);
}
console.log(String(best));
