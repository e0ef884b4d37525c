const [hh, mm] = require("fs").readFileSync(0, "utf8").trim().split(":");
const h = Number(hh);
console.log(`${(h + 11) % 12 + 1}:${mm} ${h < 12 ? "AM" : "PM"}`);
