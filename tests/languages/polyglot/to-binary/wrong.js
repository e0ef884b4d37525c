const n = Number(require("fs").readFileSync(0, "utf8").trim());
let d = "";
for (let m = n; m > 0; m = Math.floor(m / 2)) d = String(m % 2) + d;
console.log(d);
