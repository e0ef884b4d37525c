const n = Number(require("fs").readFileSync(0, "utf8").trim());
let result = 1n;
for (let i = 1; i < n; i++) result = (result * BigInt(i)) % 1000000007n;
console.log(result.toString());
