const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
const values = data.slice(1, data[0] + 1).sort((a, b) => b - a);
console.log(values.length > 1 ? String(values[1]) : "NONE");
