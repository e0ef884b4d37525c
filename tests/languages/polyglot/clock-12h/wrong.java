import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        String[] parts = new Scanner(System.in).next().split(":");
        int h = Integer.parseInt(parts[0]);
        System.out.println((h <= 12 ? h : h - 12) + ":" + parts[1] + (h < 12 ? " AM" : " PM"));
    }
}
