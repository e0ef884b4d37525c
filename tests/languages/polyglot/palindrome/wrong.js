const s = require("fs").readFileSync(0, "utf8").trim().toLowerCase();
console.log(s === [...s].reverse().join("") ? "YES" : "NO");
