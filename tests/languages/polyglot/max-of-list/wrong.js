const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const n = data[0];
let best = 0;
for (const x of data.slice(1, n + 1)) if (x > best) best = x;
console.log(String(best));
