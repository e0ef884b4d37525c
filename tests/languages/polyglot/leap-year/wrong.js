const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const out = data.slice(1, data[0] + 1).map((y) => (y % 4 === 0 && y % 100 !== 0 ? "YES" : "NO"));
console.log(out.join("\n"));
