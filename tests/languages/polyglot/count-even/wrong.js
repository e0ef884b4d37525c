const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const n = data[0];
console.log(String(data.slice(1, n + 1).filter((x) => x > 0 && x % 2 === 0).length));
