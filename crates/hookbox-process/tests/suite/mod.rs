mod supervise;
