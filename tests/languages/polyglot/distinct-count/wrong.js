const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const v = data.slice(1, data[0] + 1);
console.log(String(v.filter((x, i) => i === 0 || x !== v[i - 1]).length));
