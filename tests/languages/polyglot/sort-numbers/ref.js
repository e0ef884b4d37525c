const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const v = data.slice(1, data[0] + 1);
v.sort((a, b) => a - b);
console.log(v.join(" "));
