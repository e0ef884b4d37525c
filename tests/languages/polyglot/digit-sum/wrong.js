const s = require("fs").readFileSync(0, "utf8").trim();
let sum = 0;
for (let i = 0; i < s.length - 1; i++) sum += s.charCodeAt(i) - 48;
console.log(String(sum));
