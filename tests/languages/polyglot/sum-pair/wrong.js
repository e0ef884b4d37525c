const [a, b] = require("fs").readFileSync(0, "utf8").trim().split(/\s+/).map(Number);
console.log(String(Math.abs(a) + Math.abs(b)));
