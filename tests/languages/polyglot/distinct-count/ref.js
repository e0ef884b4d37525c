const data = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
console.log(String(new Set(data.slice(1, data[0] + 1)).size));
