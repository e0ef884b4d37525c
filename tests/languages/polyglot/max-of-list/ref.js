const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const n = data[0];
console.log(String(Math.max(...data.slice(1, n + 1))));
